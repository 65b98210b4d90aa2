//! tuner (in progress).
