"""The networks follow paper 000's Tables 1-4 layer by layer."""

import pytest
import torch
from torch import nn

from suite.gan.models import Discriminator, Generator, build_pair


def layers(module):
    return [m for m in module.modules() if not isinstance(m, (nn.Sequential, Generator, Discriminator))]


def test_generator_matches_table_1_at_32px():
    g = Generator(image_size=32, channels=1, latent_dim=100)
    linear, relu = g.input
    assert (linear.in_features, linear.out_features) == (100, 8192)  # Table 1: Input 100 -> 8192, ReLU
    assert isinstance(relu, nn.ReLU)
    kinds = [type(m).__name__ for m in g.blocks]
    assert kinds == [
        "BatchNorm2d",
        "Upsample",
        "Conv2d",
        "BatchNorm2d",
        "LeakyReLU",
        "Upsample",
        "Conv2d",
        "BatchNorm2d",
        "LeakyReLU",
        "Conv2d",
        "Tanh",
    ]
    bn0, up1, conv1, bn1, act1, up2, conv2, bn2, act2, conv3, _ = g.blocks
    assert (bn0.eps, bn0.momentum) == (1e-5, 0.1)
    assert (bn1.eps, bn1.momentum) == (0.8, 0.1) and (bn2.eps, bn2.momentum) == (0.8, 0.1)
    assert up1.scale_factor == 2 and up2.scale_factor == 2
    for conv, (cin, cout) in ((conv1, (128, 128)), (conv2, (128, 64)), (conv3, (64, 1))):
        assert (conv.in_channels, conv.out_channels) == (cin, cout)
        assert conv.kernel_size == (3, 3) and conv.stride == (1, 1) and conv.padding == (1, 1)
    assert act1.negative_slope == 0.2 and act2.negative_slope == 0.2
    assert g(torch.randn(5, 100)).shape == (5, 1, 32, 32)


def test_conditional_generator_matches_table_3():
    g = Generator(image_size=32, channels=3, latent_dim=100, num_classes=10)
    assert (g.input[0].in_features, g.input[0].out_features) == (110, 8192)  # Table 3: 110 -> 8192
    out = g(torch.randn(4, 100), torch.tensor([0, 1, 2, 9]))
    assert out.shape == (4, 3, 32, 32) and out.abs().max() <= 1
    with pytest.raises(ValueError, match="labels"):
        g(torch.randn(4, 100))


def test_discriminator_matches_table_2():
    d = Discriminator(image_size=32, channels=3)
    convs = [m for m in d.features if isinstance(m, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels) for c in convs] == [(3, 16), (16, 32), (32, 64), (64, 128)]
    assert all(c.kernel_size == (3, 3) and c.stride == (2, 2) and c.padding == (1, 1) for c in convs)
    assert [m.p for m in d.features if isinstance(m, nn.Dropout)] == [0.25] * 4
    assert [m.negative_slope for m in d.features if isinstance(m, nn.LeakyReLU)] == [0.2] * 4
    norms = [m for m in d.features if isinstance(m, nn.BatchNorm2d)]
    assert [(n.num_features, n.eps, n.momentum) for n in norms] == [(32, 0.8, 0.1), (64, 0.8, 0.1), (128, 0.8, 0.1)]
    # the first block has no BatchNorm: conv, LeakyReLU, Dropout, then the second conv
    assert [type(m).__name__ for m in list(d.features)[:4]] == ["Conv2d", "LeakyReLU", "Dropout", "Conv2d"]
    assert d(torch.randn(6, 3, 32, 32)).shape == (6,)


def test_discriminator_head_is_2048_for_64px_as_printed_in_the_tables():
    assert Discriminator(image_size=64, channels=3).head.in_features == 2048  # 128 x 4 x 4
    assert Discriminator(image_size=32, channels=1).head.in_features == 512  # 128 x 2 x 2
    assert Discriminator(image_size=28, channels=1).head.in_features == 512  # 28 -> 14 -> 7 -> 4 -> 2


def test_conditional_discriminator_uses_the_label():
    torch.manual_seed(0)
    d = Discriminator(image_size=20, channels=1, num_classes=10, dropout=0.0).eval()
    nn.init.normal_(d.embed.weight)
    x = torch.randn(2, 1, 20, 20)
    assert not torch.allclose(d(x, torch.tensor([0, 0])), d(x, torch.tensor([3, 3])))


def test_build_pair_is_determined_by_the_seed_alone():
    g1, d1 = build_pair(20, 1, 100, seed=7)
    torch.randn(1000)  # unrelated use of the global generator must not matter
    g2, d2 = build_pair(20, 1, 100, seed=7)
    g3, _ = build_pair(20, 1, 100, seed=8)
    state = torch.random.get_rng_state()
    build_pair(20, 1, 100, seed=9)
    assert torch.equal(torch.random.get_rng_state(), state)  # building draws nothing from the global generator
    for a, b in zip(g1.state_dict().values(), g2.state_dict().values()):
        assert torch.equal(a, b)
    for a, b in zip(d1.state_dict().values(), d2.state_dict().values()):
        assert torch.equal(a, b)
    assert not torch.equal(g1.input[0].weight, g3.input[0].weight)


@pytest.mark.parametrize("size", [6, 16, 30])
def test_unsupported_image_sizes_are_rejected(size):
    with pytest.raises(ValueError, match="multiple of 4 .* at least 20"):
        Generator(image_size=size)
    with pytest.raises(ValueError, match="1x1 feature map"):
        Discriminator(image_size=size)


def test_the_smallest_discriminator_map_is_two_by_two():
    # 20 -> 10 -> 5 -> 3 -> 2: real and fake batches keep per-position differences after BatchNorm
    assert Discriminator(image_size=20).head.in_features == 128 * 2 * 2


# --- the critic's normalisation (model.critic_norm) -------------------------------------------------------


def test_critic_norm_builds_the_right_layers():
    table = [type(m).__name__ for m in Discriminator(image_size=32, channels=3).features]
    batch = Discriminator(image_size=32, channels=3, norm="batch")
    assert [type(m).__name__ for m in batch.features] == table  # the tables' network, as checked above
    none = Discriminator(image_size=32, channels=3, norm="none")
    assert not any(isinstance(m, (nn.BatchNorm2d, nn.GroupNorm, nn.LayerNorm)) for m in none.modules())
    layer = Discriminator(image_size=32, channels=3, norm="layer")
    assert not any(isinstance(m, nn.BatchNorm2d) for m in layer.modules())
    groups = [m for m in layer.features if isinstance(m, nn.GroupNorm)]
    assert [(g.num_groups, g.num_channels) for g in groups] == [(1, 32), (1, 64), (1, 128)]
    # the same places as the tables' BatchNorm, the same layer sizes
    assert [type(m).__name__ for m in layer.features] == [k.replace("BatchNorm2d", "GroupNorm") for k in table]
    assert layer.head.in_features == batch.head.in_features == none.head.in_features == 512
    with pytest.raises(ValueError, match="not one of batch, layer, none"):
        Discriminator(norm="instance")


def test_build_pair_passes_the_critic_norm_and_initialises_its_scales():
    _, d = build_pair(20, 1, 100, seed=3, critic_norm="layer")
    scales = torch.cat([m.weight for m in d.modules() if isinstance(m, nn.GroupNorm)])
    assert d.norm == "layer" and 0.9 < scales.min() < 1 < scales.max() < 1.1  # N(1, 0.02), from the seed
    assert build_pair(20, 1, 100, seed=3)[1].norm == "batch"


def per_sample_gradient_norms(critic, x, seed=0):
    """||grad_x critic(x)_i|| for every sample i, with the dropout masks drawn from ``seed``."""
    torch.manual_seed(seed)
    x = x.clone().requires_grad_(True)
    (grads,) = torch.autograd.grad(critic(x).sum(), x)
    return grads.flatten(1).norm(dim=1)


@pytest.mark.parametrize("norm, independent", [("layer", True), ("none", True), ("batch", False)])
def test_the_gradient_penalty_of_a_per_sample_critic_ignores_the_rest_of_the_batch(norm, independent):
    from suite.gan.losses import gradient_penalty

    _, critic = build_pair(20, 1, 100, seed=0, critic_norm=norm)
    critic.train()  # as in training: batch statistics, dropout on
    x = torch.randn(4, 1, 20, 20, generator=torch.Generator().manual_seed(1))
    changed = x.clone()
    changed[1] = 3 * torch.randn(1, 20, 20, generator=torch.Generator().manual_seed(2))
    before, after = per_sample_gradient_norms(critic, x), per_sample_gradient_norms(critic, changed)
    # the penalty is the mean of (||grad_i|| - 1)^2 over these norms: same dropout draws, same value
    torch.manual_seed(0)
    penalty = gradient_penalty(critic, x, x, eps=torch.ones(4))
    assert penalty.item() == pytest.approx(((before - 1) ** 2).mean().item(), rel=1e-5)
    same = torch.allclose(before[[0, 2, 3]], after[[0, 2, 3]], rtol=1e-5, atol=1e-7)
    assert same is independent  # under BatchNorm, sample 0's gradient moves with sample 1
    assert not torch.isclose(before[1], after[1])


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
@pytest.mark.parametrize("bias", [True, False])
def test_an_upsampled_convolution_is_the_upsampling_then_the_convolution(layout, bias):
    """UpsampledConv gives nearest x2 upsampling then the 3x3 convolution, to float rounding, on square and oblong
    inputs (every border phase), in either layout."""
    from suite.gan.upsampling import UpsampledConv

    torch.manual_seed(0)
    conv = nn.Conv2d(6, 5, 3, padding=1, bias=bias)
    plain = nn.Sequential(nn.Upsample(scale_factor=2), conv).to(memory_format=layout)
    cheap = UpsampledConv(conv).to(memory_format=layout)
    with torch.no_grad():
        for shape in ((3, 6, 4, 4), (2, 6, 3, 7), (1, 6, 1, 1)):
            x = torch.randn(shape).contiguous(memory_format=layout)
            expected, got = plain(x), cheap(x)
            assert got.shape == expected.shape
            assert torch.allclose(got, expected, rtol=0, atol=1e-5 * expected.abs().max().item())


@pytest.mark.parametrize("num_classes", [0, 10])
def test_a_generator_for_sampling_draws_the_trained_generators_images(num_classes):
    """for_sampling turns both upsampling steps of the DC-GAN generator (and the DC-CGAN's) into UpsampledConv and its
    images stay those of the generator as built to a few 1e-6; the MLP generator has no such step and is left whole."""
    import copy

    from suite.gan.upsampling import UpsampledConv, for_sampling

    generator, _ = build_pair(20, 1, 100, num_classes, seed=3)
    generator.eval()
    cheap = for_sampling(copy.deepcopy(generator)).to(memory_format=torch.channels_last)
    assert sum(isinstance(m, UpsampledConv) for m in cheap.blocks) == 2
    assert sum(isinstance(m, nn.Upsample) for m in cheap.modules()) == 0
    z = torch.randn(64, 100, generator=torch.Generator().manual_seed(1))
    labels = torch.arange(64) % 10 if num_classes else None
    with torch.no_grad():
        assert (cheap(z, labels) - generator(z, labels)).abs().max() < 2e-5
    mlp, _ = build_pair(20, 1, 100, seed=3, architecture="mlp")
    before = [type(m) for m in mlp.modules()]
    assert [type(m) for m in for_sampling(mlp).modules()] == before


def test_only_plain_upsampling_pairs_are_rewritten_for_sampling():
    """A pair whose convolution is a subclass, carries a hook or a hook-computed weight (spectral norm), or that sits in a
    Sequential subclass with a forward of its own, is left whole (and the network's output with it); a plain
    Sequential network is rewritten itself, and another kernel or upsampling is no pair."""
    import copy

    from suite.gan.upsampling import UpsampledConv, for_sampling

    class ScaledConv(nn.Conv2d):
        def forward(self, x):
            return super().forward(2 * x)

    class Residual(nn.Sequential):
        def forward(self, x):
            return super().forward(x) + nn.functional.interpolate(x, scale_factor=2)

    def hooked():
        conv = nn.Conv2d(3, 3, 3, padding=1)
        conv.register_forward_hook(lambda module, args, out: out * 3)
        return conv

    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 4)
    kept = [
        nn.Sequential(nn.Upsample(scale_factor=2), ScaledConv(3, 3, 3, padding=1)),
        nn.Sequential(nn.Upsample(scale_factor=2), hooked()),
        nn.Sequential(nn.Upsample(scale_factor=2), nn.utils.spectral_norm(nn.Conv2d(3, 3, 3, padding=1))),
        Residual(nn.Upsample(scale_factor=2), nn.Conv2d(3, 3, 3, padding=1)),
        nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(3, 3, 5, padding=2)),
        nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear"), nn.Conv2d(3, 3, 3, padding=1)),
    ]
    for network in kept:
        network.eval()
        with torch.no_grad():
            before = network(x)
            after = for_sampling(network)(x)
        assert not any(isinstance(m, UpsampledConv) for m in network.modules())
        assert torch.equal(after, before)
    plain = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(3, 3, 3, padding=1), nn.Tanh())
    with torch.no_grad():
        expected = plain(x)
        rewritten = for_sampling(copy.deepcopy(plain))
        assert [type(m) for m in rewritten] == [UpsampledConv, nn.Tanh]
        assert torch.allclose(rewritten(x), expected, atol=1e-5)


def test_the_sampler_samples_with_the_rewritten_generators_of_each_shape():
    """The Sampler's networks carry UpsampledConv (copied from one storage-less skeleton per shape): bundles of two
    shapes in one process each get their own, with the bundle's weights."""
    from suite.gan.sampling import GeneratorBundle, Sampler
    from suite.gan.seeding import torch_generator
    from suite.gan.upsampling import UpsampledConv

    for size, classes in ((20, 0), (32, 10)):
        generator, _ = build_pair(size, 1, 100, classes, seed=5)
        state = {name: t.detach().clone() for name, t in generator.state_dict().items()}
        bundle = GeneratorBundle(
            kind="single",
            image_size=size,
            channels=1,
            latent_dim=100,
            num_classes=classes or 10,
            conditional=bool(classes),
            generators={"all": state},
            class_prior={c: 0.1 for c in range(10)},
        )
        sampler = Sampler(bundle)
        assert sum(isinstance(m, UpsampledConv) for m in sampler.networks["all"].modules()) == 2
        images, labels = sampler.sample(8, seed=1)
        assert images.shape == (8, 1, size, size)
        z = torch.randn(8, 100, generator=torch_generator(1, "sample-noise"))  # the noise Sampler.sample draws
        with torch.no_grad():
            expected = generator.eval()(z, labels if classes else None)
        assert (images - expected).abs().max() < 2e-5
