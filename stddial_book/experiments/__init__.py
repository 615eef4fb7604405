"""Experiments: the controlled run, the cached testbed runs, recorded runs, probes, the statistics of logs."""
