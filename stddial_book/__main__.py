"""``python -m stddial_book``: see :mod:`stddial_book.cli`."""

import sys

from .cli import main

sys.exit(main())
