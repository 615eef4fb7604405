"""``python -m stddial_book``: see :mod:`stddial_book.cli`."""

import sys

from stddial_book.cli import main

sys.exit(main())
