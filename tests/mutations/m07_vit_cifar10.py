"""Chapter 07: classic mistakes in cutting patches, embedding them, the pre-norm block and the ViT."""
from tests.mutations import Mutation

CHAPTER = "07_vit_cifar10"
_PERMUTE = "x = x.permute(0, 2, 4, 3, 5, 1)                  # b h w p1 p2 c"
_PE_OUT = "return x.flatten(2).transpose(1, 2)  # (B, N, dim), patches in row-major order"
_ATTN = """        h = self.norm1(x)                              # normalise the branch input only
        x = x + self.drop1(self.attn(h, h, h)[0])     # self-attention: q = k = v = LN(x)
        x = x + self.mlp(self.norm2(x))                # the MLP reads the updated stream"""
_CAT = "x = torch.cat([cls, x], dim=1) + self.pos_embed  # (B, N + 1, dim): CLS in front, then positions"
_HEAD = "return self.head(self.norm(x[:, 0]))             # classify from the CLS token"

MUTATIONS = [
    # patchify: the order of patches and of the numbers inside a patch
    Mutation("patchify", "patchify-patches-column-major", _PERMUTE, "x = x.permute(0, 4, 2, 3, 5, 1)"),
    Mutation("patchify", "patchify-channels-first", _PERMUTE, "x = x.permute(0, 2, 4, 1, 3, 5)"),
    Mutation("patchify", "patchify-pixels-column-major", _PERMUTE, "x = x.permute(0, 2, 4, 5, 3, 1)"),
    Mutation("patchify", "patchify-reshape-without-permute",
             "x = images.reshape(B, C, H // P, P, W // P, P)   # b c h p1 w p2",
             "return images.reshape(B, (H // P) * (W // P), P * P * C)"),
    # PatchEmbedding
    Mutation("PatchEmbedding", "patch-embedding-reshape-not-transpose", _PE_OUT,
             "return x.reshape(x.shape[0], -1, x.shape[1])"),
    Mutation("PatchEmbedding", "patch-embedding-overlapping-stride-1",
             "kernel_size=patch_size, stride=patch_size)", "kernel_size=patch_size, stride=1)"),
    Mutation("PatchEmbedding", "patch-embedding-features-first", _PE_OUT, "return x.flatten(2)"),
    Mutation("PatchEmbedding", "patch-embedding-column-major", _PE_OUT,
             "return x.transpose(2, 3).flatten(2).transpose(1, 2)"),
    # EncoderBlock
    Mutation("EncoderBlock", "encoder-post-norm", _ATTN,
             """        x = self.norm1(x + self.drop1(self.attn(x, x, x)[0]))
        x = self.norm2(x + self.mlp(x))"""),
    Mutation("EncoderBlock", "encoder-residual-from-normalised-input", _ATTN,
             """        x = self.norm1(x)
        x = x + self.drop1(self.attn(x, x, x)[0])
        x = self.norm2(x)
        x = x + self.mlp(x)"""),
    Mutation("EncoderBlock", "encoder-parallel-branches", _ATTN,
             """        h = self.norm1(x)
        x = x + self.drop1(self.attn(h, h, h)[0]) + self.mlp(self.norm2(x))"""),
    Mutation("EncoderBlock", "encoder-no-final-mlp-norm",
             "x = x + self.mlp(self.norm2(x))                # the MLP reads the updated stream",
             "x = x + self.mlp(x)"),
    # ViT
    Mutation("ViT", "vit-cls-appended-at-end", _CAT,
             "x = torch.cat([x, cls], dim=1) + self.pos_embed"),
    Mutation("ViT", "vit-cls-at-end-read-at-end", _CAT + "\n        x = self.dropout(x)\n        for block in self.blocks:\n"
             "            x = block(x)\n        " + _HEAD,
             "x = torch.cat([x, cls], dim=1) + self.pos_embed\n        x = self.dropout(x)\n        for block in self.blocks:\n"
             "            x = block(x)\n        return self.head(self.norm(x[:, -1]))"),
    Mutation("ViT", "vit-head-on-mean-of-patches", _HEAD, "return self.head(self.norm(x[:, 1:].mean(dim=1)))"),
    Mutation("ViT", "vit-no-position-embedding", _CAT, "x = torch.cat([cls, x], dim=1)"),
    Mutation("ViT", "vit-position-embedding-frozen",
             "self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, dim))",
             "self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, dim), requires_grad=False)"),
    Mutation("ViT", "vit-position-embedding-plain-tensor",
             "self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, dim))",
             "self.pos_embed = torch.zeros(1, num_patches + 1, dim)"),
    Mutation("ViT", "vit-blocks-output-discarded", "            x = block(x)\n", "            y = block(x)\n"),
    Mutation("ViT", "vit-blocks-in-python-list",
             "self.blocks = nn.ModuleList([EncoderBlock(dim, num_heads, mlp_dim, dropout) for _ in range(depth)])",
             "self.blocks = [EncoderBlock(dim, num_heads, mlp_dim, dropout) for _ in range(depth)]"),
]
