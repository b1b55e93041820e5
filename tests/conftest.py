"""Small real workspaces, built by the tests: several languages, tests, docs and bad input."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from delphi_ls import Engine

FILES: dict[str, str] = {
    "README.md": """
        # Shipyard
        Shipyard schedules container builds. See docs/retry.md for how failed uploads are retried.
        """,
    "docs/retry.md": """
        # Retries
        Uploads that fail with a transient network error are retried with exponential backoff.
        The backoff doubles after every attempt, up to `max_delay`.
        """,
    "CHANGELOG.md": """
        # Changelog
        ## 1.2.0
        - retry uploads with backoff; tests for the retry policy
        - grpc proxy TLS settings
        """,
    "shipyard/__init__.py": '''
        """Shipyard: container build scheduling."""
        from .retry import RetryPolicy, with_backoff
        ''',
    "shipyard/retry.py": '''
        """Retry policy for flaky uploads."""
        import random
        import time


        class RetryPolicy:
            """How often and how long to wait between attempts."""

            def __init__(self, attempts: int = 5, base_delay: float = 0.1, max_delay: float = 10.0):
                self.attempts = attempts
                self.base_delay = base_delay
                self.max_delay = max_delay

            def delay_for(self, attempt: int) -> float:
                """Exponential backoff with jitter."""
                return min(self.max_delay, self.base_delay * (2 ** attempt)) * random.uniform(0.5, 1.0)


        def with_backoff(fn, policy: RetryPolicy):
            for attempt in range(policy.attempts):
                try:
                    return fn()
                except ConnectionError:
                    time.sleep(policy.delay_for(attempt))
            raise RuntimeError("upload failed after all retry attempts")
        ''',
    "shipyard/scheduler.py": '''
        """Build scheduling: a priority queue of build jobs across workers."""
        import heapq


        class BuildScheduler:
            def __init__(self, workers: int):
                self.workers = workers
                self.queue: list[tuple[int, str]] = []

            def submit(self, job_id: str, priority: int = 0) -> None:
                heapq.heappush(self.queue, (-priority, job_id))

            def next_job(self) -> str | None:
                return heapq.heappop(self.queue)[1] if self.queue else None
        ''',
    "tests/test_retry.py": '''
        from shipyard.retry import RetryPolicy, with_backoff


        def test_delay_grows():
            p = RetryPolicy(base_delay=1.0, max_delay=100)
            assert p.delay_for(3) >= 4.0


        def test_with_backoff_gives_up():
            calls = []
            def boom():
                calls.append(1)
                raise ConnectionError()
            try:
                with_backoff(boom, RetryPolicy(attempts=2, base_delay=0))
            except RuntimeError:
                pass
            assert len(calls) == 2
        ''',
    "tests/test_scheduler.py": '''
        from shipyard.scheduler import BuildScheduler


        def test_priority_order():
            s = BuildScheduler(workers=2)
            s.submit("a", 1)
            s.submit("b", 5)
            assert s.next_job() == "b"
        ''',
    "tests/test_pipeline_integration.py": '''
        from shipyard.scheduler import BuildScheduler


        def test_end_to_end_build():
            s = BuildScheduler(workers=1)
            s.submit("job")
            assert s.next_job() == "job"
        ''',
    "proxy/grpc_proxy.go": '''
        package proxy

        import (
            "crypto/tls"
            "net"
        )

        // GrpcProxy forwards gRPC traffic to a backend.
        type GrpcProxy struct {
            Backend string
            TLS     *tls.Config
        }

        // NewGrpcProxy sets up TLS for the gRPC proxy from a certificate pair.
        func NewGrpcProxy(backend, certFile, keyFile string) (*GrpcProxy, error) {
            cert, err := tls.LoadX509KeyPair(certFile, keyFile)
            if err != nil {
                return nil, err
            }
            return &GrpcProxy{Backend: backend, TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}, nil
        }

        func (p *GrpcProxy) Listen(addr string) (net.Listener, error) {
            return tls.Listen("tcp", addr, p.TLS)
        }
        ''',
    "proxy/grpc_proxy_test.go": '''
        package proxy

        import "testing"

        func TestNewGrpcProxyMissingCert(t *testing.T) {
            if _, err := NewGrpcProxy("b", "missing.pem", "missing.key"); err == nil {
                t.Fatal("expected an error")
            }
        }
        ''',
    "web/src/api.ts": '''
        import { RetryPolicy } from "./policy";

        export interface UploadResult {
          ok: boolean;
          bytes: number;
        }

        export async function uploadArtifact(url: string, body: Blob): Promise<UploadResult> {
          const res = await fetch(url, { method: "PUT", body });
          return { ok: res.ok, bytes: body.size };
        }

        export class ArtifactClient {
          constructor(private base: string) {}
          list(): Promise<string[]> {
            return fetch(this.base + "/artifacts").then((r) => r.json());
          }
        }
        ''',
    "web/src/policy.ts": '''
        export type RetryPolicy = { attempts: number };
        export const defaultPolicy: RetryPolicy = { attempts: 3 };
        ''',
    "web/src/BuildBadge.tsx": '''
        import React from "react";

        export function BuildBadge({ status }: { status: string }) {
          return <span className={"badge " + status}>{status}</span>;
        }
        ''',
    "web/src/format.js": '''
        function formatDuration(ms) {
          const s = Math.round(ms / 1000);
          return s < 60 ? s + "s" : Math.floor(s / 60) + "m " + (s % 60) + "s";
        }

        const humanBytes = (n) => (n > 1024 ? (n / 1024).toFixed(1) + " KiB" : n + " B");

        module.exports = { formatDuration, humanBytes };
        ''',
    "web/src/format.test.js": '''
        const { formatDuration } = require("./format");
        test("formats minutes", () => {
          expect(formatDuration(61000)).toBe("1m 1s");
        });
        ''',
    "engine/src/lib.rs": '''
        //! Build graph evaluation.
        use std::collections::HashMap;

        pub struct BuildGraph {
            edges: HashMap<String, Vec<String>>,
        }

        impl BuildGraph {
            pub fn new() -> Self {
                BuildGraph { edges: HashMap::new() }
            }

            pub fn topological_order(&self) -> Vec<String> {
                let mut out: Vec<String> = self.edges.keys().cloned().collect();
                out.sort();
                out
            }
        }

        pub trait Step {
            fn run(&self) -> Result<(), String>;
        }
        ''',
    "jvm/src/main/java/dev/shipyard/CacheKey.java": '''
        package dev.shipyard;

        import java.security.MessageDigest;

        /** Content-addressed cache keys for build outputs. */
        public class CacheKey {
            private final String digest;

            public CacheKey(String digest) {
                this.digest = digest;
            }

            public static CacheKey fromBytes(byte[] data) throws Exception {
                MessageDigest md = MessageDigest.getInstance("SHA-256");
                return new CacheKey(java.util.HexFormat.of().formatHex(md.digest(data)));
            }

            public String value() {
                return digest;
            }
        }
        ''',
    "config/settings.yaml": """
        workers: 4
        upload:
          retries: 5
        """,
    ".gitignore": """
        build/
        *.log
        """,
    "web/.gitignore": """
        dist/
        """,
    ".delphiignore": """
        secret_notes.txt
        """,
    "build/output.py": "print('ignored by .gitignore')\n",
    "web/dist/bundle.js": "console.log('ignored by nested gitignore')\n",
    "app.log": "ignored log\n",
    "secret_notes.txt": "ignored by delphiignore\n",
    "package-lock.json": '{"lockfileVersion": 3}\n',
}


def build_workspace(root: Path, huge_bytes: int = 1_200_000) -> Path:
    for rel, text in FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    (root / "assets").mkdir(exist_ok=True)
    (root / "assets" / "logo.dat").write_bytes(b"\x89PNG\x00\x01\x02binary\x00" * 20)
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "huge.txt").write_text("x" * huge_bytes)
    (root / "legacy").mkdir(exist_ok=True)
    (root / "legacy" / "latin1.py").write_bytes("# caf\xe9 cr\xe8me: legacy encoding\ndef brulee():\n    return 1\n".encode("latin-1"))
    (root / "web" / "src" / "vendor.min.js").write_text("var a=1;" * 1000)
    # A symlink loop and a link out of the root: neither may be followed.
    os.symlink(root, root / "loop")
    os.symlink("/etc", root / "outside")
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return build_workspace(tmp_path / "ws")


@pytest.fixture
def engine(workspace: Path, tmp_path: Path):
    eng = Engine(workspace, index_dir=str(tmp_path / "index"))
    eng.index()
    yield eng
    eng.close()
