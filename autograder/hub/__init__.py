"""A class on a JupyterHub: the course file and the command that sets the hub up from it. [trusted]"""
