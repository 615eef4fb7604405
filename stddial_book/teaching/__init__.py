"""Short reference code the chapters show, one idea per function, tied to the engine by equivalence tests."""
