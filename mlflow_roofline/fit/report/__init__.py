"""What a fit run shows besides its params and metrics: the plots (plots), the Markdown
description (markdown) and the files, figures and measured-vs-predicted table logged into
the run (run_page)."""
