"""The image service: a Glance v2 client (``glance``), its errors (``errors``) and a development
image service with Glance's API shape (``local``). See docs/images.md."""
