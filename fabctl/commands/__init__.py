"""The commands of `python -m fabctl`, one module each with its parser (`add_parser(sub, project_dir)`) and its
`cmd_*`; fabctl/cli.py builds the top-level parser from them. What several commands share: `common` (exit statuses,
renders, saved plans) and `charts` (Helm, chart packages and the caches)."""
