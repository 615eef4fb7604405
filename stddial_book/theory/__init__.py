"""The mathematics: the recipes' advantages, the identity's closed forms, silent groups, the group-size law, the SymPy derivation."""
