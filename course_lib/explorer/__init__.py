"""The attention explorer: head view, model view and query-key view, offline.

    from course_lib.explorer import explore
    explore(gpt, "To be, or not to be", tokenizer)                  # a course GPT
    explore(model, tokenizer=tok, source="Mon 21 Mar 94")           # notebook 05's Transformer
    explore(A, tokens=words, q=Q, k=K)                              # arrays
    explorer.save_html("heads.html")                                # a page to send
    explorer.static()                                               # a matplotlib figure

widget.py: the widget (Python side) and its saved pages; widget.js, widget.css: what the
browser runs; standalone.js: starts widget.js in a saved page; static.py: the matplotlib
fallback; capture.py: queries, keys and weights from the course models.
"""
from course_lib.explorer.capture import explore, from_arrays, token_names
from course_lib.explorer.widget import AttentionExplorer, AttentionMaps

__all__ = ["AttentionExplorer", "AttentionMaps", "explore", "from_arrays", "token_names"]
