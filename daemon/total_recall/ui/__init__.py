"""The local web view (`total-recall ui`): Starlette app, templates and static files."""
