"""The appendix's reproduction page: every numbered result of the source paper beside the book's value."""
