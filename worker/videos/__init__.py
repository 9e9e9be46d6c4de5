"""Video out: mlx-vlm's video generation, one clip at a time, paced per denoising step."""
