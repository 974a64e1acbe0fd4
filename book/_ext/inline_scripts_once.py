"""Sphinx extension: every inline <script> of the book's pages once, not twice.

sphinx-togglebutton (at `builder-inited`) and sphinx-thebe (at `env-before-read-docs`) register
inline scripts after the HTML builder was initialised. Sphinx 7.4 hands such a script to the
builder at once with the file name `None`, and again from its registry with the file name `''`
when it prepares writing; the two do not compare equal, so each page carried both copies and
the browser rejected the second `const THEBE_JS_URL`. Dropping the early copies once reading is
done leaves the registry's, in their proper priority order.
"""


def drop_early_inline_scripts(app, env):
    scripts = getattr(app.builder, "script_files", None)
    if scripts is not None:
        scripts[:] = [script for script in scripts if script.filename is not None]
    return []


def setup(app):
    app.connect("env-updated", drop_early_inline_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
