"""Video out: mlx-vlm's video generation, paced per denoising step, one clip denoised at a
time."""
