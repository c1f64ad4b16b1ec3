"""In-tree plugins, one module (or folder) each, named as upstream's."""
