"""Shared values of the key pair and quota tests."""

from __future__ import annotations

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIP4ZV2jFdbathh4ZbSCqBKDjJCVWsclo6/Vd3mHdAIs7 me@host"
