"""cli stage."""

from .core import (  # noqa: F401
    _train_config,
    build_parser,
    main,
)
