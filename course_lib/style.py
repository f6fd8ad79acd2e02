"""Colours that every figure of the course shares, so that a masked cell looks the same in a
heatmap (``viz``), in the attention explorer's static view (``explorer``) and in the grader's
pictures of a failing case (``autograder.picture``)."""

MASKED_COLOR = "#b0b0b0"  # grey + hatching: not allowed to attend (weight 0 by construction)
