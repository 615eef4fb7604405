"""The book's data, shipped with the package as ``stddial_book.data``.

In the repository these files sit in the top-level ``data/`` folder; ``pyproject.toml`` maps
that folder onto the subpackage ``stddial_book.data`` of a wheel, so an installed package (what a
Colab notebook installs) carries them. Read them with :func:`stddial_book.core.resources.data_path`,
which finds the same files in a checkout and in a wheel install:

- ``solve_rates/``: small derived solve-count tables (chapter 7), each with a
  ``.provenance.json`` that says where it came from and which script made it;
- ``runs/``: recorded reference training runs (chapters 10-13), each with its provenance.
"""
