"""Part V (chapter 16): allocation rules measured on a pool of known pass rates, in the controlled run, and
on the testbed's recorded runs."""
