// placeholder until the generator writes this folder
