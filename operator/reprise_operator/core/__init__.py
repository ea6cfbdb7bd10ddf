"""The shared lifecycle: the driver, the reconcile every kind runs, and the transitions the kinds share.

Imports the doors, the rules and shared; the kinds build on it.
"""
