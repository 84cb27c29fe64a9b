"""The readable history as pages: templates, HTML and JSON rendering, image sniffing.

- ``render``: each page as a JSON-able document and as HTML (the viewer's and the static
  export's); ``markdown``: a message's text as HTML, nothing injectable; ``images``: image
  bytes served only when their magic numbers say a browser can show them safely.
"""
