"""The kinds: one folder per kind (its steps, its pure rules, its kind-only modules) and `lifecycles`, the
one list of them the handlers register.
"""
