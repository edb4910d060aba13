"""Command line: ``voxassay DOMAIN VERB`` and cross-domain verbs; subcommands load lazily."""
