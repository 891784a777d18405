"""From exact, bounded engine results to released answers: pricing, noise and post-processing."""
