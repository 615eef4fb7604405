"""The identity, checked (chapters 2 to 4): the advantage tables, the identity's errors on random scores
and on the testbed transformer's real gradients."""
