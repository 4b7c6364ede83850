"""Sessions: each notebook panel's stage work in plain Python (a script or test needs no widget), one module each,
imported by name so each pulls in only its stage.
"""
