"""The ground every layer stands on: argument checks, the output-directory policy, the shipped files."""
