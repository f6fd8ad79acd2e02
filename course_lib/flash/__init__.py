"""Attention that never holds the T_q x T_k matrix (notebook 07): see ``reference`` for the derivation."""
