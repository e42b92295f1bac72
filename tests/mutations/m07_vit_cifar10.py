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
    Mutation(
        "patchify",
        "patchify-patches-column-major",
        _PERMUTE,
        "x = x.permute(0, 4, 2, 3, 5, 1)",
    ),
    Mutation(
        "patchify",
        "patchify-channels-first",
        _PERMUTE,
        "x = x.permute(0, 2, 4, 1, 3, 5)",
    ),
    Mutation(
        "patchify",
        "patchify-pixels-column-major",
        _PERMUTE,
        "x = x.permute(0, 2, 4, 5, 3, 1)",
    ),
    Mutation(
        "patchify",
        "patchify-reshape-without-permute",
        "x = images.reshape(B, C, H // P, P, W // P, P)   # b c h p1 w p2",
        "return images.reshape(B, (H // P) * (W // P), P * P * C)",
    ),
    # PatchEmbedding
    Mutation(
        "PatchEmbedding",
        "patch-embedding-reshape-not-transpose",
        _PE_OUT,
        "return x.reshape(x.shape[0], -1, x.shape[1])",
    ),
    Mutation(
        "PatchEmbedding",
        "patch-embedding-overlapping-stride-1",
        "kernel_size=patch_size, stride=patch_size)",
        "kernel_size=patch_size, stride=1)",
    ),
    Mutation(
        "PatchEmbedding",
        "patch-embedding-features-first",
        _PE_OUT,
        "return x.flatten(2)",
    ),
    Mutation(
        "PatchEmbedding",
        "patch-embedding-column-major",
        _PE_OUT,
        "return x.transpose(2, 3).flatten(2).transpose(1, 2)",
    ),
    # EncoderBlock
    Mutation(
        "EncoderBlock",
        "encoder-post-norm",
        _ATTN,
        """        x = self.norm1(x + self.drop1(self.attn(x, x, x)[0]))
        x = self.norm2(x + self.mlp(x))""",
    ),
    Mutation(
        "EncoderBlock",
        "encoder-residual-from-normalised-input",
        _ATTN,
        """        x = self.norm1(x)
        x = x + self.drop1(self.attn(x, x, x)[0])
        x = self.norm2(x)
        x = x + self.mlp(x)""",
    ),
    Mutation(
        "EncoderBlock",
        "encoder-parallel-branches",
        _ATTN,
        """        h = self.norm1(x)
        x = x + self.drop1(self.attn(h, h, h)[0]) + self.mlp(self.norm2(x))""",
    ),
    Mutation(
        "EncoderBlock",
        "encoder-no-final-mlp-norm",
        "x = x + self.mlp(self.norm2(x))                # the MLP reads the updated stream",
        "x = x + self.mlp(x)",
    ),
    # ViT
    Mutation(
        "ViT",
        "vit-cls-appended-at-end",
        _CAT,
        "x = torch.cat([x, cls], dim=1) + self.pos_embed",
    ),
    Mutation(
        "ViT",
        "vit-cls-at-end-read-at-end",
        _CAT
        + "\n        x = self.dropout(x)\n        for block in self.blocks:\n"
        "            x = block(x)\n        " + _HEAD,
        "x = torch.cat([x, cls], dim=1) + self.pos_embed\n        x = self.dropout(x)\n        for block in self.blocks:\n"
        "            x = block(x)\n        return self.head(self.norm(x[:, -1]))",
    ),
    Mutation(
        "ViT",
        "vit-head-on-mean-of-patches",
        _HEAD,
        "return self.head(self.norm(x[:, 1:].mean(dim=1)))",
    ),
    Mutation(
        "ViT",
        "vit-no-position-embedding",
        _CAT,
        "x = torch.cat([cls, x], dim=1)",
    ),
    Mutation(
        "ViT",
        "vit-position-embedding-frozen",
        "self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, dim))",
        "self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, dim), requires_grad=False)",
    ),
    Mutation(
        "ViT",
        "vit-position-embedding-plain-tensor",
        "self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, dim))",
        "self.pos_embed = torch.zeros(1, num_patches + 1, dim)",
    ),
    Mutation(
        "ViT",
        "vit-blocks-output-discarded",
        "            x = block(x)\n",
        "            y = block(x)\n",
    ),
    Mutation(
        "ViT",
        "vit-blocks-in-python-list",
        "self.blocks = nn.ModuleList([EncoderBlock(dim, num_heads, mlp_dim, dropout) for _ in range(depth)])",
        "self.blocks = [EncoderBlock(dim, num_heads, mlp_dim, dropout) for _ in range(depth)]",
    ),
    Mutation(
        "patchify",
        "patchify-strided-grouping",
        None,
        """def patchify(images, patch_size):
    from einops import rearrange
    # (p1 h) instead of (h p1): each "patch" gathers every (H/P)-th pixel, not a P x P block
    return rearrange(images, "b c (p1 h) (p2 w) -> b (h w) (p1 p2 c)", p1=patch_size, p2=patch_size)
""",
    ),
    Mutation(
        "ViT",
        "vit-position-embedding-summed",
        _CAT,
        "x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)\n"
        "        x = x + self.pos_embed[:, : x.shape[1] - 1].sum(1, keepdim=True)  # one vector for every position",
    ),
]

# ------------------------------------------------------------------ more mistakes
_PE_IN = "self.proj = nn.Conv2d(in_chans, dim, kernel_size=patch_size, stride=patch_size)"
_ZEROS = "self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))"
_POS = "self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, dim))"
_BLOCKS = "self.blocks = nn.ModuleList([EncoderBlock(dim, num_heads, mlp_dim, dropout) for _ in range(depth)])"
_EMB_DROP = "self.dropout = nn.Dropout(dropout)"
_LOOP = "        x = self.dropout(x)\n        for block in self.blocks:\n            x = block(x)\n"

MUTATIONS += [
    # patchify: (c p1 p2) inside a patch through unfold, and column-major patches through rearrange
    Mutation(
        "patchify",
        "patchify-unfold-channels-first",
        None,
        '''def patchify(images, patch_size):
    """(B, C, H, W) -> (B, N, P*P*C)."""
    # F.unfold lists each patch as (c p1 p2): the channels are not moved last.
    return torch.nn.functional.unfold(images, patch_size, stride=patch_size).transpose(1, 2)
''',
    ),
    Mutation(
        "patchify",
        "patchify-rearrange-column-major",
        None,
        '''def patchify(images, patch_size):
    """(B, C, H, W) -> (B, N, P*P*C)."""
    return rearrange(images, "b c (h p1) (w p2) -> b (w h) (p1 p2 c)", p1=patch_size, p2=patch_size)
''',
    ),
    # PatchEmbedding: no bias
    Mutation(
        "PatchEmbedding",
        "patch-embedding-no-bias",
        _PE_IN,
        "self.proj = nn.Conv2d(in_chans, dim, kernel_size=patch_size, stride=patch_size, bias=False)",
    ),
    # EncoderBlock: activation, scale, dropout
    Mutation("EncoderBlock", "encoder-relu-mlp", "nn.GELU()", "nn.ReLU()"),
    Mutation(
        "EncoderBlock",
        "encoder-attention-without-scale",
        _ATTN,
        """        B, N, D = x.shape
        H = self.attn.num_heads
        h = self.norm1(x)
        q, k, v = (t.reshape(B, N, H, D // H).transpose(1, 2)
                   for t in (self.attn.w_q(h), self.attn.w_k(h), self.attn.w_v(h)))
        weights = torch.softmax(torch.einsum("bhnd,bhmd->bhnm", q, k), dim=-1)  # the 1/sqrt(d) is missing
        out = torch.einsum("bhnm,bhmd->bhnd", self.attn.dropout(weights), v).transpose(1, 2).reshape(B, N, D)
        x = x + self.drop1(self.attn.w_o(out))
        x = x + self.mlp(self.norm2(x))""",
    ),
    Mutation(
        "EncoderBlock",
        "encoder-dropout-ignored",
        "x = x + self.drop1(self.attn(h, h, h)[0])",
        "x = x + self.attn(h, h, h)[0]",
    ),
    Mutation(
        "EncoderBlock",
        "encoder-dropout-on-residual-stream",
        "x = x + self.drop1(self.attn(h, h, h)[0])",
        "x = self.drop1(x + self.attn(h, h, h)[0])",
    ),
    # ViT
    Mutation(
        "ViT",
        "vit-post-norm-blocks",
        "            x = block(x)\n",
        "            x = self.norm(block(x))  # post-norm: a LayerNorm on the stream after every block\n",
    ),
    Mutation(
        "ViT",
        "vit-dropout-not-passed-to-blocks",
        _BLOCKS,
        "self.blocks = nn.ModuleList([EncoderBlock(dim, num_heads, mlp_dim) for _ in range(depth)])",
    ),
    Mutation(
        "ViT",
        "vit-dropout-argument-ignored",
        _EMB_DROP + "\n        " + _BLOCKS,
        "self.dropout = nn.Dropout(0.1)\n        "
        "self.blocks = nn.ModuleList([EncoderBlock(dim, num_heads, mlp_dim, 0.1) for _ in range(depth)])",
    ),
    Mutation(
        "ViT",
        "vit-embedding-dropout-omitted",
        _LOOP,
        "        for block in self.blocks:\n            x = block(x)\n",
    ),
    Mutation(
        "ViT",
        "vit-dropout-on-residual-stream",
        _LOOP,
        "        x = self.dropout(x)\n        for block in self.blocks:\n            x = self.dropout(block(x))\n",
    ),
    Mutation(
        "ViT",
        "vit-mean-pooling",
        _HEAD,
        "return self.head(self.norm(x.mean(dim=1)))",
    ),
    Mutation(
        "ViT",
        "vit-pos-embed-before-cls",
        _CAT,
        "x = torch.cat([cls, x + self.pos_embed[:, 1:]], dim=1)  # CLS joins after the positions",
    ),
    Mutation(
        "ViT",
        "vit-pos-embed-n-rows-before-cls",
        _POS + "\n",
        "self.pos_embed = nn.Parameter(torch.zeros(1, num_patches, dim))\n",
    ),
    Mutation(
        "ViT", "vit-missing-final-norm", _HEAD, "return self.head(x[:, 0])"
    ),
    Mutation(
        "ViT",
        "vit-cls-from-cpu-zeros",
        "cls = self.cls_token.expand(x.shape[0], -1, -1)",
        "cls = torch.zeros(x.shape[0], 1, x.shape[2]) + self.cls_token  # a fresh tensor on the CPU",
    ),
]

# ------------------------------------------------------------------ correct answers written differently
VARIANTS = [
    Mutation(
        "patchify",
        "patchify-rearrange",
        None,
        '''def patchify(images, patch_size):
    """(B, C, H, W) -> (B, N, P*P*C)."""
    return rearrange(images, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch_size, p2=patch_size)
''',
    ),
    Mutation(
        "patchify",
        "patchify-unfold",
        None,
        '''def patchify(images, patch_size):
    """(B, C, H, W) -> (B, N, P*P*C) with Tensor.unfold, printing and warning as it goes."""
    import warnings
    P = patch_size
    x = images.unfold(2, P, P).unfold(3, P, P)   # b c h w p1 p2
    print("unfolded:", tuple(x.shape))
    warnings.warn("patchify: a warning must not cost points")
    x = x.permute(0, 2, 3, 4, 5, 1)              # b h w p1 p2 c
    return x.reshape(x.shape[0], -1, P * P * images.shape[1])
''',
    ),
    Mutation(
        "patchify",
        "patchify-functional-unfold",
        None,
        '''def patchify(images, patch_size):
    """(B, C, H, W) -> (B, N, P*P*C) with F.unfold, whose columns are (c p1 p2)."""
    B, C = images.shape[:2]
    P = patch_size
    cols = torch.nn.functional.unfold(images, P, stride=P)       # (B, C*P*P, N)
    cols = cols.reshape(B, C, P * P, -1)                          # b c (p1 p2) n
    return cols.permute(0, 3, 2, 1).reshape(B, -1, P * P * C)     # b n (p1 p2) c
''',
    ),
    Mutation(
        "patchify",
        "patchify-view-contiguous",
        _PERMUTE,
        "x = x.permute(0, 2, 4, 3, 5, 1).contiguous()\n    return x.view(B, -1, P * P * C)",
    ),
    Mutation(
        "PatchEmbedding",
        "patch-embedding-rearrange",
        _PE_OUT,
        'return rearrange(x, "b d h w -> b (h w) d")',
    ),
    Mutation(
        "PatchEmbedding",
        "patch-embedding-patchify-linear",
        "x = self.proj(images)                # (B, dim, H/P, W/P): one dim-vector per patch\n        "
        + _PE_OUT,
        "p = self.proj.kernel_size[0]\n"
        "        w = rearrange(self.proj.weight, 'd c p1 p2 -> d (p1 p2 c)')  # the Conv2d as a Linear\n"
        "        patches = rearrange(images, 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)', p1=p, p2=p)\n"
        "        return torch.nn.functional.linear(patches, w, self.proj.bias)",
    ),
    Mutation(
        "EncoderBlock",
        "encoder-layernorm-eps-1e-6",
        "self.norm1 = nn.LayerNorm(dim)",
        "self.norm1 = nn.LayerNorm(dim, eps=1e-6)",
    ),
    Mutation(
        "EncoderBlock",
        "encoder-einsum-attention",
        _ATTN,
        """        B, N, D = x.shape
        H = self.attn.num_heads
        h = self.norm1(x)
        q, k, v = (t.reshape(B, N, H, D // H).transpose(1, 2)
                   for t in (self.attn.w_q(h), self.attn.w_k(h), self.attn.w_v(h)))
        scores = torch.einsum("bhnd,bhmd->bhnm", q, k) / (D // H) ** 0.5
        weights = scores.softmax(dim=-1)
        out = torch.einsum("bhnm,bhmd->bhnd", self.attn.dropout(weights), v).transpose(1, 2).reshape(B, N, D)
        x = x + self.drop1(self.attn.w_o(out))
        x = x + self.mlp(self.norm2(x))""",
    ),
    Mutation(
        "EncoderBlock",
        "encoder-functional-dropout",
        _ATTN,
        """        p = self.drop1.p
        h = self.norm1(x)
        x = x + torch.nn.functional.dropout(self.attn(h, h, h)[0], p, training=self.training)
        fc1, fc2 = self.mlp[0], self.mlp[3]
        h = torch.nn.functional.dropout(self.mlp[1](fc1(self.norm2(x))), p, training=self.training)
        x = x + torch.nn.functional.dropout(fc2(h), p, training=self.training)""",
    ),
    Mutation(
        "EncoderBlock",
        "encoder-gelu-tanh",
        "nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Dropout(dropout),",
        'nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(approximate="tanh"), nn.Dropout(dropout),',
    ),
    Mutation(
        "EncoderBlock",
        "encoder-own-names-no-sequential",
        None,
        '''class EncoderBlock(nn.Module):
    """The same layers under names of one's own, the MLP without nn.Sequential, LayerNorm eps 1e-6."""

    def __init__(self, dim, num_heads, mlp_dim, dropout=0.0):
        super().__init__()
        self.ln_attn = nn.LayerNorm(dim, eps=1e-6)
        self.attn = MultiHeadAttention(dim, num_heads, dropout=dropout)
        self.attn_drop = nn.Dropout(dropout)
        self.ln_mlp = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, mlp_dim)
        self.act = nn.GELU()
        self.drop_hidden = nn.Dropout(dropout)
        self.fc2 = nn.Linear(mlp_dim, dim)
        self.drop_out = nn.Dropout(dropout)

    def forward(self, x):
        h = self.ln_attn(x)
        x = x + self.attn_drop(self.attn(h, h, h)[0])
        h = self.drop_hidden(self.act(self.fc1(self.ln_mlp(x))))
        return x + self.drop_out(self.fc2(h))
''',
    ),
    Mutation(
        "ViT",
        "vit-sequential-blocks",
        _BLOCKS + "\n",
        "self.blocks = nn.Sequential(*[EncoderBlock(dim, num_heads, mlp_dim, dropout) for _ in range(depth)])\n",
    ),
    Mutation(
        "ViT",
        "vit-layernorm-eps-1e-6",
        "self.norm = nn.LayerNorm(dim)",
        "self.norm = nn.LayerNorm(dim, eps=1e-6)",
    ),
    Mutation(
        "ViT",
        "vit-sequential-blocks-extra-buffer",
        None,
        '''class ViT(nn.Module):
    """Blocks called as one nn.Sequential, a buffer of its own, timm's LayerNorm eps, F.dropout, other names."""

    def __init__(self, img_size, patch_size, num_classes, dim, depth, num_heads, mlp_dim, in_chans=3, dropout=0.0):
        super().__init__()
        self.p = dropout
        self.embed = PatchEmbedding(img_size, patch_size, in_chans, dim)
        self.register_buffer("grid", torch.arange((img_size // patch_size) ** 2))
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, len(self.grid) + 1, dim) * 0.5)
        self.encoder = nn.Sequential(*(EncoderBlock(dim, num_heads, mlp_dim, dropout) for _ in range(depth)))
        self.mlp_head = nn.Sequential(nn.LayerNorm(dim, eps=1e-6), nn.Linear(dim, num_classes))

    def forward(self, images):
        x = self.embed(images)
        x = torch.cat([self.cls_token.expand(len(x), -1, -1), x], dim=1) + self.pos_embed
        x = torch.nn.functional.dropout(x, self.p, training=self.training)
        return self.mlp_head(self.encoder(x)[:, 0])
''',
    ),
    Mutation(
        "ViT",
        "vit-prints-shapes-cls-new-zeros",
        None,
        '''class ViT(nn.Module):
    """Prints its shapes and warns; the CLS token built from x.new_zeros (on the input's device)."""

    def __init__(self, img_size, patch_size, num_classes, dim, depth, num_heads, mlp_dim, in_chans=3, dropout=0.0):
        super().__init__()
        self.norm = nn.LayerNorm(dim)  # registered first: order of registration is free
        self.head = nn.Linear(dim, num_classes)
        self.patch_embed = PatchEmbedding(img_size, patch_size, in_chans, dim)
        self.cls_token = nn.Parameter(torch.empty(1, 1, dim).uniform_(-0.1, 0.1))
        self.pos_embed = nn.Parameter(torch.zeros(1, (img_size // patch_size) ** 2 + 1, dim))
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList()
        for _ in range(depth):
            self.blocks.append(EncoderBlock(dim, num_heads, mlp_dim, dropout))

    def forward(self, images):
        import warnings
        x = self.patch_embed(images)
        print("patch tokens:", tuple(x.shape))
        warnings.warn("ViT: a warning must not cost points")
        cls = x.new_zeros(x.shape[0], 1, x.shape[2]) + self.cls_token
        x = self.drop(torch.cat((cls, x), dim=1) + self.pos_embed)
        print("tokens:", tuple(x.shape))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])
''',
    ),
    Mutation(
        "ViT",
        "vit-einops-repeat-cls-hstack",
        _CAT,
        "from einops import repeat\n"
        "        cls = repeat(self.cls_token, '1 1 d -> b 1 d', b=x.size(0))\n"
        "        x = torch.cat((cls, x), 1)\n"
        "        x = x + self.pos_embed[:, : x.size(1)]",
    ),
    Mutation(
        "patchify",
        "patchify-unfold-tensor-method",
        None,
        """def patchify(images, patch_size):
    b, c, h, w = images.shape
    p = patch_size
    t = images.unfold(2, p, p).unfold(3, p, p)            # (b, c, h/p, w/p, p, p)
    t = t.permute(0, 2, 3, 4, 5, 1).contiguous()         # (b, h/p, w/p, p1, p2, c)
    return t.view(b, -1, p * p * c)
""",
    ),
]

# The class edition's twins (course_utils/models/twins.py): the course's modules computed by
# torchvision's ViT.  Imported into an answer cell they compute the right thing, and answer nothing.
MUTATIONS += [
    Mutation(
        "PatchEmbedding",
        "patch-embedding-class-edition-twin",
        None,
        "from course_utils.models.twins import PatchEmbedding\n",
    ),
    Mutation(
        "EncoderBlock",
        "encoder-class-edition-twin",
        None,
        "from course_utils.models.twins import EncoderBlock\n",
    ),
    Mutation(
        "ViT",
        "vit-class-edition-twin",
        None,
        "from course_utils.models.twins import ViT\n",
    ),
]
