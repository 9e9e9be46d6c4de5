"""LoRA adapters loaded at run time on a served text model, chosen per request.

files.py reads and checks an adapter directory in mlx-lm's layout; layer.py is the linear layer
that adds each row's own adapter to the base layer's output; registry.py names the loaded
adapters, installs the layers and says which rows of the model call being built use which.
"""
