#!/bin/bash
# Used by bench/RESULTS.md, "A 100,000-file workspace (issue 18), session 6": bash bench/assemble_100k.sh
# A vendored monorepo: every mirror at HEAD, plus older releases of the larger ones side by side.
set -e
OUT=/work/ws100k/vendor
rm -rf $OUT; mkdir -p $OUT
add() { # mirror ref
  local g=/work/.mirror/$1/repo; [ -d $g ] || g=/work/.mirror/$1
  local d=$OUT/$1@$(echo $2 | tr '/' '_'); mkdir -p $d
  git --git-dir=$g archive $2 | tar -x -C $d
}
# The 33 repositories fetched when the workspace was first assembled (session 6), named: later sessions
# fetched more mirrors, and "every mirror" would silently make a different workspace.
REPOS="BurntSushi+ripgrep Delgan+loguru clap-rs+clap etcd-io+etcd expressjs+express fastapi+fastapi gabime+spdlog
gin-gonic+gin go-chi+chi httpie+cli huggingface+diffusers koajs+koa marshmallow-code+marshmallow mockito+mockito
pallets+flask pre-commit+pre-commit psf+black psf+requests pypa+packaging pytest-dev+pytest python-attrs+attrs
redis+hiredis serilog+serilog sharkdp+fd sinatra+sinatra sindresorhus+ky slimphp+Slim spring-projects+spring-boot
square+okio tokio-rs+tokio tqdm+tqdm vitejs+vite vuejs+core"
for m in $REPOS; do add $m HEAD; done
for t in v2.6.0 v3.0.0 v3.2.0 v3.4.0 v2.7.0 v3.1.0 v3.3.0; do add spring-projects+spring-boot $t; done
for t in v0.26.0 v0.30.3 v0.35.0; do add huggingface+diffusers $t; done
for t in 0.135.1 0.120.0; do add fastapi+fastapi $t 2>/dev/null || true; done
for t in v5.4.0 v4.10.0; do add mockito+mockito $t; done
find $OUT -type f | wc -l
du -sh $OUT
