"""Chapter 13's dial-only ablation on the testbed: the design and its study, the recording, what the
chapter reads from the recorded runs, the pooled cells and the words."""
