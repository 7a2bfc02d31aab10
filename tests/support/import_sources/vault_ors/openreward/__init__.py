"""Stands in for the OpenReward SDK (`openreward`), which this project does not install: see
`openreward.environments`."""
