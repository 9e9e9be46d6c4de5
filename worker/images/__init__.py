"""Images out on mlx-vlm's image generation: a prompt (and a picture to edit) -> pictures."""
