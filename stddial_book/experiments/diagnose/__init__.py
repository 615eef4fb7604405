"""A reader's prompt pool, diagnosed (``python -m stddial_book diagnose``, chapter 16): the report and its
recommendation."""
