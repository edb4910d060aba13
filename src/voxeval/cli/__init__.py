"""Command line: ``voxeval DOMAIN VERB`` and cross-domain verbs; subcommands load lazily."""
