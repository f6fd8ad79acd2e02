"""The course library: numpy references and torch twins, one module per concept.

The symbols used in every docstring, B, T, d_model, n_heads, d_k, Q, K, V, S, A and the rest,
are defined once, in the glossary of course_lib/README.md (also shown in notebook 00).
"""
