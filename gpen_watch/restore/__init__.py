"""Face restoration: everything that imports torch lives below this package.

Only worker processes and the one-shot `restore` command import it; the daemon never does.
"""
