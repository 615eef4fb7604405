"""Chapter 15's recorded SmolLM2 runs, read and analysed as their plan states."""
