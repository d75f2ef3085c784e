"""The library face over any Python objective: `hpo.optimize` (`optimization`), and the
simulated clock it can run on (`simulation`), which answers "what would W workers buy me"
without waiting for them."""
