"""The book's presentation: figures, glue and tables, widgets."""
