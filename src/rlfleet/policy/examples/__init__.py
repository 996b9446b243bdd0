"""Example policies: scripted players a league or an evaluation can field beside trained
policies (connect_four.py). Example envs are in `rlfleet.env.examples`; each example sits in
the layer of what it extends (a scripted player subclasses `Policy`)."""
