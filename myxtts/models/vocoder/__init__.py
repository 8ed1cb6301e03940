"""HiFi-GAN vocoder: modules and loss functions; the trainer drives the stage.

Recipe (one vocoder step; the batch holds ``mel`` (B, Tm, M), ``wav`` (B, Tm * hop),
``mel_lens``; all of it is sync-free and shape-static, so each half compiles)::

    from myxtts.audio import MelSpectrogram
    from myxtts.models.vocoder import (HiFiGANGenerator, MultiPeriodDiscriminator,
        MultiScaleDiscriminator, random_segments, discriminator_loss, generator_loss)

    gen = HiFiGANGenerator(cfg.vocoder, cfg.audio.n_mels, cfg.audio.hop_length)
    mpd, msd = MultiPeriodDiscriminator(), MultiScaleDiscriminator()
    mel_fn = MelSpectrogram(cfg.audio)            # the loss mel = the features' mel
    opt_g = AdamW(gen.parameters(), cfg.vocoder.lr, betas=(0.8, 0.99))
    opt_d = AdamW([*mpd.parameters(), *msd.parameters()], cfg.vocoder.lr, betas=(0.8, 0.99))
    # (the paper decays both learning rates by 0.999 per epoch)

    mel, wav = random_segments(batch["mel"], batch["wav"], batch["mel_lens"],
                               cfg.vocoder.segment_frames, cfg.audio.hop_length)
    fake = gen(mel)                                # (B, segment_frames * hop)

    # 1) discriminators, on a detached generator output
    d_loss = (discriminator_loss(mpd(wav)[0], mpd(fake.detach())[0])
              + discriminator_loss(msd(wav)[0], msd(fake.detach())[0]))
    opt_d.zero_grad(); d_loss.backward(); opt_d.step()

    # 2) generator, through the just-updated discriminators (real feature maps recomputed)
    (_, mpd_real), (_, msd_real) = mpd(wav), msd(wav)
    g = generator_loss(cfg.vocoder, mel_fn, fake, mel, mpd(fake), msd(fake), mpd_real, msd_real)
    opt_g.zero_grad(); g["loss"].backward(); opt_g.step()

Train on ground-truth mels first; fine-tuning on the acoustic model's teacher-forced
``mel_post`` (same batches) removes the remaining mismatch. Export with
``checkpoint.save_model(path, gen, cfg, vocab, kind="vocoder")``; ``myxtts synthesize --vocoder``
loads it. The discriminators are training state only (the trainer's resume checkpoint).
"""
from myxtts.models.vocoder.discriminators import (
                                                  MultiPeriodDiscriminator,
                                                  MultiScaleDiscriminator,
                                                  PeriodDiscriminator,
                                                  ScaleDiscriminator,
)
from myxtts.models.vocoder.generator import HiFiGANGenerator, random_segments, upsample_rates
from myxtts.models.vocoder.losses import (
                                                  adversarial_loss,
                                                  discriminator_loss,
                                                  feature_matching_loss,
                                                  generator_loss,
                                                  mel_loss,
)

__all__ = [
    "HiFiGANGenerator", "MultiPeriodDiscriminator", "MultiScaleDiscriminator",
    "PeriodDiscriminator", "ScaleDiscriminator", "random_segments", "upsample_rates",
    "adversarial_loss", "discriminator_loss", "feature_matching_loss", "generator_loss",
    "mel_loss",
]
