"""The fast CPU operations (worker/speech/cpu_ops.py) and Kokoro's decoder in them
(worker/speech/kokoro_fast.py) compute what the stock MLX operations compute, for every shape
the decoder uses and the edge cases around them."""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np
import pytest

from worker.speech import cpu_ops, kokoro_fast


def close(a: mx.array, b: mx.array, tolerance: float = 2e-5) -> None:
    a, b = np.array(a), np.array(b)
    assert a.shape == b.shape
    scale = max(1.0, float(np.abs(b).max()))
    assert float(np.abs(a - b).max()) <= tolerance * scale


@pytest.mark.parametrize(
    ("channels_in", "channels_out", "kernel", "stride", "padding", "dilation", "length"),
    [
        (32, 48, 3, 1, 1, 1, 50),
        (32, 32, 7, 1, 15, 5, 64),  # an AdaIN resblock's dilated convolution
        (16, 16, 11, 1, 25, 5, 40),
        (22, 24, 12, 6, 3, 1, 61),  # the noise convolution's stride
        (20, 20, 1, 1, 0, 1, 9),  # 1x1
        (8, 4, 5, 2, 0, 3, 30),
    ],
)
def test_conv1d_equals_the_stock_one(channels_in, channels_out, kernel, stride, padding,
                                     dilation, length):  # fmt: skip
    x = mx.random.normal((2, length, channels_in), key=mx.random.key(1))
    weight = mx.random.normal((channels_out, kernel, channels_in), key=mx.random.key(2))
    kwargs = {"stride": stride, "padding": padding, "dilation": dilation}
    close(cpu_ops.conv1d(x, weight, **kwargs), mx.conv1d(x, weight, **kwargs))


@pytest.mark.parametrize(
    ("channels_in", "channels_out", "kernel", "stride", "padding", "output_padding"),
    [
        (64, 32, 20, 10, 5, 0),  # the generator's first upsampling
        (32, 16, 12, 6, 3, 0),  # its second
        (8, 8, 3, 2, 1, 1),  # a pool's shape (ungrouped), with output padding
        (8, 6, 5, 2, 0, 0),  # a kernel that is not a multiple of the stride
        (4, 4, 3, 1, 1, 0),
    ],
)
def test_conv_transpose1d_equals_the_stock_one(channels_in, channels_out, kernel, stride,
                                               padding, output_padding):  # fmt: skip
    x = mx.random.normal((2, 17, channels_in), key=mx.random.key(3))
    weight = mx.random.normal((channels_out, kernel, channels_in), key=mx.random.key(4))
    kwargs = {"stride": stride, "padding": padding, "output_padding": output_padding}
    close(cpu_ops.conv_transpose1d(x, weight, **kwargs),
          mx.conv_transpose1d(x, weight, **kwargs))  # fmt: skip


def test_grouped_convolutions_are_the_stock_ones():
    x = mx.random.normal((1, 10, 6), key=mx.random.key(5))
    weight = mx.random.normal((6, 3, 1), key=mx.random.key(6))
    close(cpu_ops.conv1d(x, weight, padding=1, groups=6), mx.conv1d(x, weight, padding=1,
          groups=6))  # fmt: skip
    got = cpu_ops.conv_transpose1d(x, weight, stride=2, padding=1, groups=6)
    close(got, mx.conv_transpose1d(x, weight, stride=2, padding=1, groups=6))


def test_sin_equals_the_stock_one_far_from_zero_too():
    x = mx.concatenate([mx.linspace(-4 * math.pi, 4 * math.pi, 100001), mx.array([1e4, -3e3])])
    close(cpu_ops.sin(x), mx.sin(x), 1e-6)


def test_the_decoder_module_gets_them_on_the_cpu_only():
    from mlx_audio.tts.models.kokoro import istftnet

    installed = kokoro_fast.install()
    assert installed == (mx.default_device() == mx.cpu)
    if installed:
        assert istftnet.mx.conv1d is cpu_ops.conv1d and istftnet.mx.exp is mx.exp
        assert kokoro_fast.install() and mx.conv1d is not cpu_ops.conv1d  # mlx.core untouched


@pytest.mark.skipif(mx.default_device() != mx.cpu, reason="installed where MLX runs on the CPU")
@pytest.mark.parametrize(("kernel", "length"), [(3, 40), (7, 33), (11, 64)])
def test_the_resblock_equals_the_stock_one(monkeypatch, kernel, length):
    from mlx_audio.tts.models.kokoro import istftnet

    kokoro_fast.install()
    block = istftnet.AdaINResBlock1(16, kernel, (1, 3, 5), style_dim=8)
    # alphas away from 1 and weights away from their initialisation's symmetry
    block.update(
        {
            "alpha1": [mx.random.uniform(0.5, 2, (1, 16, 1), key=mx.random.key(i)) for i in range(3)],
            "alpha2": [mx.random.uniform(0.5, 2, (1, 16, 1), key=mx.random.key(9 + i)) for i in range(3)],
        }
    )  # fmt: skip
    x = mx.random.normal((2, 16, length), key=mx.random.key(20))
    s = mx.random.normal((2, 8), key=mx.random.key(21))
    fast = block(x, s)
    monkeypatch.setattr(istftnet, "mx", mx)  # the stock call on the stock operations
    close(fast, kokoro_fast.STOCK_RESBLOCK(block, x, s), 1e-4)


@pytest.mark.skipif(mx.default_device() != mx.cpu, reason="installed where MLX runs on the CPU")
def test_a_stage_last_resblock_on_the_side_stream_gives_the_same_audio_bit_for_bit(monkeypatch):
    from mlx.utils import tree_map
    from mlx_audio.tts.models.kokoro.istftnet import Generator

    kokoro_fast.install()
    # Kokoro-82M's generator (three kernels a stage) at a sixteenth of its channels
    generator = Generator(style_dim=8, resblock_kernel_sizes=[3, 7, 11], upsample_rates=[10, 6],
                          upsample_initial_channel=32, resblock_dilation_sizes=[[1, 3, 5]] * 3,
                          upsample_kernel_sizes=[20, 12], gen_istft_n_fft=20,
                          gen_istft_hop_size=5)  # fmt: skip
    keys = iter(range(100, 1000))
    generator.update(  # away from the all-ones initialisation, the spectrum's exp kept finite
        tree_map(
            lambda p: 0.2 * mx.random.normal(p.shape, key=mx.random.key(next(keys))),
            generator.parameters(),
        )  # fmt: skip
    )
    x = mx.random.normal((1, 32, 12), key=mx.random.key(30))
    s = mx.random.normal((1, 8), key=mx.random.key(31))
    f0 = mx.random.uniform(80, 300, (1, 12), key=mx.random.key(32))

    def spoken() -> mx.array:
        mx.random.seed(3)  # the harmonic source's noise
        return generator(x, s, f0)

    alone = spoken()
    kokoro_fast.to_side_stream(generator)
    sides = [getattr(block, "on_side_stream", False) for block in generator.resblocks]
    assert sides == [False, False, True, False, False, True]
    streams = []
    side_stream = kokoro_fast.side_stream
    monkeypatch.setattr(kokoro_fast, "side_stream", lambda: streams.append(1) or side_stream())
    assert bool(mx.all(mx.isfinite(alone))) and mx.array_equal(spoken(), alone).item()
    assert len(streams) == 2  # one block a stage was built there
