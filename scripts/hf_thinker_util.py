"""What scripts/gen_thinker_fixtures.py and scripts/check_merged_thinker.py share: transformers' multimodal classes,
eager attention, and our dataset-layout inputs turned into the keyword arguments of a thinker's forward."""
import torch
import transformers


def model_class(name):
    """transformers' class `name`, also where a version does not export it at the top level."""
    cls = getattr(transformers, name, None)
    if cls is None:
        from transformers.models.qwen3_omni_moe import modeling_qwen3_omni_moe
        cls = getattr(modeling_qwen3_omni_moe, name)
    return cls


def set_eager(config):
    """Eager attention in the config and every sub-config (the fixtures are fp32 CPU references)."""
    for sub in (config, getattr(config, "thinker_config", None), getattr(config, "text_config", None),
                getattr(config, "vision_config", None), getattr(config, "audio_config", None)):
        if sub is not None:
            try:
                sub._attn_implementation = "eager"
            except Exception:  # a read-only property in some versions: the loaders' argument covers it
                pass


def pad_audio(features, lengths):
    """Our [frames, mel] (clips one after another) as transformers' input_features [clips, mel, max] + mask."""
    lengths = [int(n) for n in lengths.tolist()]
    if sum(lengths) != features.shape[0]:
        raise ValueError(f"audio_feature_lengths {lengths} do not add up to input_features' {features.shape[0]} rows")
    padded = torch.zeros(len(lengths), features.shape[1], max(lengths), dtype=features.dtype)
    mask = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    start = 0
    for k, n in enumerate(lengths):
        padded[k, :, :n] = features[start:start + n].T
        mask[k, :n] = 1
        start += n
    return padded, mask


def thinker_kwargs(inputs):
    """Forward arguments from our tensors: hf_input_ids (placeholders in), our [3, S] position_ids passed as
    [3, 1, S], an all-ones attention mask, and whichever of images, videos and audio the sample holds."""
    ids = inputs["hf_input_ids"].long()[None]
    kwargs = {"input_ids": ids, "attention_mask": torch.ones_like(ids),
              "position_ids": inputs["position_ids"][:, None, :], "use_cache": False}
    if "pixel_values" in inputs:
        kwargs.update(pixel_values=inputs["pixel_values"].float(), image_grid_thw=inputs["image_grid_thw"].long())
    if "pixel_values_videos" in inputs:
        kwargs.update(pixel_values_videos=inputs["pixel_values_videos"].float(),
                      video_grid_thw=inputs["video_grid_thw"].long())
    if "input_features" in inputs:
        features, mask = pad_audio(inputs["input_features"].float(), inputs["audio_feature_lengths"])
        kwargs.update(input_features=features, feature_attention_mask=mask)
    return kwargs
