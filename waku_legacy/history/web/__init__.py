"""The readable history as pages: templates, HTML and JSON rendering, image sniffing."""
